"""doit entry point: `doit migrate_op op=atan2`, `doit audit op=atan2`, `doit pr_report pr=N`, ...

All tasks live in pipeline/tasks.py; see `doit list` and the README.
"""

from pipeline.tasks import (  # noqa: F401  (doit discovers task_* names in this module)
    doit_config,
    task_affected,
    task_audit,
    task_backlog,
    task_build,
    task_drop_xfails,
    task_edit,
    task_migrate_op,
    task_pr_report,
    task_preview,
    task_summary,
    task_table,
    task_test_op,
)

DOIT_CONFIG = doit_config()
