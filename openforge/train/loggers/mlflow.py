"""`mlflow`: an MLflow run in the experiment named by `project`, in a file store under RUN/mlruns (`mlflow ui
--backend-store-uri RUN/mlruns`) unless the options name a `tracking_uri` (a tracking server, a database).
Needs the `mlflow` extra (mlflow-skinny). MLflow 3 keeps its file store in maintenance mode and refuses it
unless `MLFLOW_ALLOW_FILE_STORE=true`: the default store sets that (a file per metric needs no database)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


class MLflowLogger:
    def __init__(self, run: Path, project: str, name: str, config: dict[str, Any], options: dict[str, Any]):
        from mlflow.tracking import MlflowClient

        uri = options.get("tracking_uri")
        if not uri:
            uri = (run / "mlruns").resolve().as_uri()
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.client = MlflowClient(tracking_uri=uri)
        experiment = self.client.get_experiment_by_name(project)
        experiment_id = experiment.experiment_id if experiment else self.client.create_experiment(project)
        self.run_id = self.client.create_run(experiment_id, run_name=name).info.run_id
        self.client.log_dict(self.run_id, config, "config.json")

    def log(self, metrics: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(k, v, now, step) for k, v in metrics.items()])

    def close(self) -> None:
        self.client.set_terminated(self.run_id)
