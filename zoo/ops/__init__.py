"""Edge normalisers in the style of ``dgl.nn.functional.edge_softmax`` and the attention
aggregation, with their own autograd."""
from ._common import ZooOpError
from .aggregate import edge_weighted_sum
from .entmax import edge_entmax
from .qsoftmax import edge_qsoftmax
from .sparsemax import edge_sparsemax

__all__ = ["ZooOpError", "edge_entmax", "edge_qsoftmax", "edge_sparsemax", "edge_weighted_sum"]
