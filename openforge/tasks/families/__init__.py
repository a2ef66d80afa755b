"""Generated task families: fresh, verifiable one-command shell tasks on demand (the quickstart trains on them).

- `language.py`: the family language — `FamilyInstance`, `Family`, the `FamilyContext` a family draws from,
  the train / held-out split rules;
- `files.py`: the file-operation families (create, append, count, copy, rename, ...);
- `recovery.py`: families whose episodes can meet environment faults (`openforge.faults`);
- `sampler.py`: every family by name (`FAMILIES`, `get_families`), `InstanceSampler`, split checks;
- `writer.py`: instances as Harbor task directories (`write_task`, `generate_family_tasks`).
"""

from openforge.tasks.families.language import (
    Family,
    FamilyContext,
    FamilyError,
    FamilyInstance,
    combo_key,
    instance_key,
    is_heldout_number,
)
from openforge.tasks.families.recovery import RECOVERY_FAMILIES
from openforge.tasks.families.sampler import (
    FAMILIES,
    QUICKSTART_FAMILIES,
    InstanceSampler,
    check_split_disjoint,
    generate_instances,
    get_families,
)
from openforge.tasks.families.writer import generate_family_tasks, write_task

__all__ = [
    "FAMILIES",
    "QUICKSTART_FAMILIES",
    "RECOVERY_FAMILIES",
    "Family",
    "FamilyContext",
    "FamilyError",
    "FamilyInstance",
    "InstanceSampler",
    "check_split_disjoint",
    "combo_key",
    "generate_family_tasks",
    "generate_instances",
    "get_families",
    "instance_key",
    "is_heldout_number",
    "write_task",
]
