pytest_plugins = ["tests.fixtures.clusters", "tests.fixtures.spark", "tests.fixtures.etcd"]
