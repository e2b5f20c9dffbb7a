"""Model registry and assembled models."""
from zoo.models import graph_transformer, ltga, node_classifiers  # noqa: F401  (registers siggate_gt, ltga, gcn, gat, gatv2)
from zoo.models.registry import create_model, list_models, model_arguments, register_model

__all__ = ["create_model", "list_models", "model_arguments", "register_model"]
