"""Model registry, assembled models and pretrained checkpoints with model cards."""
from zoo.models import graph_transformer, ltga, node_classifiers  # noqa: F401  (registers siggate_gt, ltga, gcn, gat, gatv2)
from zoo.models.pretrained import PretrainedError, load_pretrained, save_pretrained
from zoo.models.registry import create_model, list_models, model_arguments, register_model

__all__ = ["PretrainedError", "create_model", "list_models", "load_pretrained", "model_arguments", "register_model",
           "save_pretrained"]
