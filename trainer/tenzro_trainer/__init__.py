"""tenzro_trainer: the PyTorch reference trainer of tenzro-train.

DiLoCo (Douillard et al., 2023, arXiv:2311.08105) on timeseries patch models:
H inner AdamW steps per worker, pseudo-gradient ``theta_global - theta_local``
per fragment, Byzantine-robust aggregation, outer Nesterov SGD.

Modules, one job each:

- :mod:`tenzro_trainer.config`       model / inner / outer configuration dataclasses
- :mod:`tenzro_trainer.models`       model catalog keyed by ``architecture.family``
- :mod:`tenzro_trainer.data`         long-format loader, default real collection, hashing, sharding, windows
- :mod:`tenzro_trainer.fragments`    deterministic partition of parameters into F fragments
- :mod:`tenzro_trainer.inner`        the H-step inner AdamW loop of one worker
- :mod:`tenzro_trainer.outer`        pseudo-gradients and the outer Nesterov optimizer
- :mod:`tenzro_trainer.aggregation`  Mean / TrimmedMean / CoordinateMedian / Krum and payload validation
- :mod:`tenzro_trainer.codec`        fragment tensors <-> safetensors bytes
- :mod:`tenzro_trainer.compression`  compressed pseudo-gradients: OCP MX formats, top-k with error feedback, exact decode
- :mod:`tenzro_trainer.evaluate`     held-out loss, MASE, sMAPE on rolling-origin windows
- :mod:`tenzro_trainer.simulate`     M workers + 1 syncer in one process, no chain
- :mod:`tenzro_trainer.zeroshot`     zero-shot evaluation on unseen series: MASE / WQL relative to SeasonalNaive
- :mod:`tenzro_trainer.forecast`     forecasts of raw histories of any length, any horizon (rollout)
- :mod:`tenzro_trainer.model_dir`    a trained model on disk: model.safetensors + config.json

This package knows nothing of chains or IPFS.
"""

from tenzro_trainer.errors import TrainerError

__all__ = ["TrainerError"]
__version__ = "0.1.0"
