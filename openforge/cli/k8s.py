"""`openforge k8s`: the manifests a run needs, and cleanup of a run's pods. The sandbox room's Kubernetes parts
are imported when a command runs, not for `openforge --help`."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

console = Console()
k8s_app = typer.Typer(help="Kubernetes: the manifests a run needs, and cleanup of a run's pods.", no_args_is_help=True)


@k8s_app.command("manifests")
def k8s_manifests(
    run: str = typer.Option(..., "--run", help="Run name (labels the run's NetworkPolicy and the proxy)."),
    namespace: str = typer.Option("openforge", help="Namespace of the proxy, the orchestrator and the sandboxes."),
    proxy_image: str | None = typer.Option(
        None,
        help="Image with openforge installed, for the proxy (default: "
        "openforge:<version>, as scripts/build-image.sh builds it).",
    ),
    backend: str = typer.Option("embedded", help="The proxy's inference backend (embedded | vllm:URL | sglang:URL)."),
    model_pvc: str | None = typer.Option(None, help="PersistentVolumeClaim holding the model directory."),
    runs_pvc: str | None = typer.Option(None, help="PersistentVolumeClaim for run directories (default: emptyDir)."),
    admin_token_secret: str | None = typer.Option(None, help="Secret (key `token`) with the proxy's admin token."),
    run_label: str | None = typer.Option(None, help="Sandbox label of the run, if not the run name (see `rollout`)."),
    dns: bool = typer.Option(
        False,
        help="Also let sandboxes reach kube-dns :53 (off: they reach the proxy by its "
        "Service's cluster IP, and a name server would be a tunnel out).",
    ),
) -> None:
    """Print (multi-document YAML) everything a run needs: Namespace, proxy Deployment + Service, RBAC for the
    orchestrator, NetworkPolicies. Apply with `kubectl apply -f -`."""
    from openforge.sandbox.kubernetes.manifests import PROXY_IMAGE, run_manifests, to_yaml

    objects = run_manifests(
        run,
        namespace_name=namespace,
        proxy_image=proxy_image or PROXY_IMAGE,
        backend=backend,
        model_pvc=model_pvc,
        runs_pvc=runs_pvc,
        admin_token_secret=admin_token_secret,
        allow_dns=dns,
        run_label=run_label,
    )
    typer.echo(to_yaml(objects), nl=False)


@k8s_app.command("cleanup")
def k8s_cleanup(
    run: str = typer.Option(..., "--run", help="Run directory, or the run's sandbox label."),
    namespace: str = typer.Option("openforge", help="Namespace of the sandboxes."),
    kubeconfig: str | None = typer.Option(None, help="kubeconfig file (default: in-cluster, else ~/.kube/config)."),
    context: str | None = typer.Option(None, help="kubeconfig context."),
) -> None:
    """Delete every leftover pod of a run (label openforge.run) and its NetworkPolicy, e.g. after a crash."""
    from openforge.rollout.orchestrator import run_label
    from openforge.sandbox import cleanup_run

    label = run_label(Path(run)) if Path(run).is_dir() else run  # --run: a run directory or its label
    removed = cleanup_run("kubernetes", label, namespace=namespace, kubeconfig=kubeconfig, context=context)
    console.print(f"removed {removed} pod(s) of run {label} in namespace {namespace}")
