"""doit entry point: `doit migrate_op op=atan2`, `doit audit op=atan2`, `doit pr_report pr=N`, ...

The tasks are derived from the stage table in pipeline/flows/migrate.py; see `doit list`,
`doit help TASK` and the README.
"""

from pipeline.tasks import TASKS, doit_config

globals().update(TASKS)  # doit discovers the task_* names in this module
DOIT_CONFIG = doit_config()
