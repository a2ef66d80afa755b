"""Harbor / Terminal-Bench 2.0 tasks as data: loading, schema validation, image maps, environments, rewards, and
generated task families (`families/`). Nothing here drives a sandbox: running a task (its environment set-up,
its verifier, `validate --run`) lives in `openforge.rollout` (`task_environment`, `grading`, `validate`)."""

from openforge.tasks.families import (
    FAMILIES,
    QUICKSTART_FAMILIES,
    RECOVERY_FAMILIES,
    Family,
    FamilyInstance,
    InstanceSampler,
    check_split_disjoint,
    combo_key,
    generate_family_tasks,
    generate_instances,
    get_families,
    instance_key,
    is_heldout_number,
    write_task,
)
from openforge.tasks.images import DEFAULT_IMAGE_MAP, TREE_IMAGE_MAP_FILE, ImageMap, ImageMapError, tree_image_map
from openforge.tasks.loader import (
    DirReport,
    TaskLoadError,
    find_task_dirs,
    inspect_task_dir,
    inspect_tree,
    load_task,
    load_tasks,
    parse_task_toml,
)
from openforge.tasks.model import Resources, Task, TaskConfig
from openforge.tasks.reward import REWARD_JSON, REWARD_TXT, RewardError, read_reward
from openforge.tasks.solution import SolutionError, solution_script
from openforge.tasks.validate import validate_task_dir

__all__ = [
    "TREE_IMAGE_MAP_FILE",
    "tree_image_map",
    "DEFAULT_IMAGE_MAP",
    "FAMILIES",
    "QUICKSTART_FAMILIES",
    "RECOVERY_FAMILIES",
    "REWARD_JSON",
    "REWARD_TXT",
    "DirReport",
    "Family",
    "FamilyInstance",
    "ImageMap",
    "ImageMapError",
    "InstanceSampler",
    "Resources",
    "RewardError",
    "SolutionError",
    "Task",
    "TaskConfig",
    "TaskLoadError",
    "check_split_disjoint",
    "combo_key",
    "find_task_dirs",
    "generate_family_tasks",
    "generate_instances",
    "get_families",
    "inspect_task_dir",
    "inspect_tree",
    "instance_key",
    "is_heldout_number",
    "load_task",
    "load_tasks",
    "parse_task_toml",
    "read_reward",
    "solution_script",
    "validate_task_dir",
    "write_task",
]
