"""The task data's types now live in ``bench.core.examples``; this alias module stays for the modules rewritten
alongside (engine/protocols, analysis, engine/templates) until they import from there."""

from bench.core.examples import (  # noqa: F401 - re-exported
    AttributeData,
    Examples,
    TaskData,
    Text,
    as_text,
    check_task_data,
    data_dir,
    flatten_segments,
    sample_indices,
)
