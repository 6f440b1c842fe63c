"""The file spark-submit runs as treedist's application (treedist.submit):

    spark-submit --master spark://host:7077 scripts/treedist-submit.py -c deploy.yaml
"""

from treedist.submit import main

main()
