pytest_plugins = ["tests.fixtures.clusters", "tests.fixtures.spark"]
