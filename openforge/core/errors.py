"""The kinds of error OpenForge raises: every OpenForge exception is an `OpenForgeError` of one kind, and its
message (`str(error)`) says what went wrong and what to do. docs/design.md ("Errors") draws the whole tree.

    OpenForgeError
    ├── ConfigurationError    the user's input or configuration is wrong: fix it and run again
    ├── TaskError             a task directory cannot be used as it is: fix the task
    ├── InfrastructureError   the machinery failed (a sandbox, Docker, the harness bundle), not the agent
    ├── ModelError            the model, its files or the server that runs it failed
    ├── StoreError            the trajectory store cannot be read or written as asked
    ├── RequestError          a client's request is refused (answered with a 4xx; not a command's failure)
    └── Interrupted           Ctrl-C or SIGTERM stopped the work; what finished is kept

Each room's own classes subclass one kind and keep the standard base they had (`ValueError`, `RuntimeError`,
`KeyError`, ...), so a caller that catches the standard exception still does. Where a class has two kinds, the
first one in its method resolution order is its kind (`TrainInterrupted` is `Interrupted` first).
The command line maps the kinds to exit statuses in one place (`openforge.cli.errors`).
"""

from __future__ import annotations


class OpenForgeError(Exception):
    """Base class of every exception OpenForge defines."""


class ConfigurationError(OpenForgeError):
    """The user's input or configuration is wrong (an option, a config file, a model directory, a run directory
    that cannot be used as asked); the message names it and the fix."""


class TaskError(OpenForgeError):
    """A task directory cannot be used as it is (its files, its solution, its verifier's output)."""


class InfrastructureError(OpenForgeError):
    """The machinery failed, not the agent or the user's input: a sandbox, the container runtime, the harness
    bundle, an episode's environment. In a run such a failure is retried and never graded as the agent's."""


class ModelError(OpenForgeError):
    """The model, its files (a checkpoint, a chat template) or the server that runs it failed."""


class StoreError(OpenForgeError):
    """Base class of every trajectory-store error (`openforge.store.errors`)."""


class RequestError(OpenForgeError):
    """A request a client sent (a harness to the proxy or to `serve-model`, a browser to the viewer) is refused;
    the server answers it with a 4xx in the client's own error shape."""


class Interrupted(OpenForgeError):
    """Ctrl-C or SIGTERM stopped the work: what finished is kept; the message says how to go on (empty when the
    work already said it)."""


class ListenError(ConfigurationError, OSError):
    """A server (the proxy, the viewer) cannot listen where it was asked: the address is in use or not this
    machine's; the message names it."""


KINDS = (ConfigurationError, TaskError, InfrastructureError, ModelError, StoreError, RequestError, Interrupted)


def kind_of(error: BaseException) -> type[OpenForgeError] | None:
    """The kind of an OpenForge error (the first kind in its class's method resolution order); None for an
    exception that is not an OpenForgeError, or one of the base class itself."""
    return next((c for c in type(error).__mro__ if c in KINDS), None)
