"""Edge normalisers in the style of ``dgl.nn.functional.edge_softmax``, with their own autograd."""
from ._common import ZooOpError
from .entmax import edge_entmax
from .qsoftmax import edge_qsoftmax
from .sparsemax import edge_sparsemax

__all__ = ["ZooOpError", "edge_entmax", "edge_qsoftmax", "edge_sparsemax"]
