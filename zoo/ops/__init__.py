"""Edge normalisers in the style of ``dgl.nn.functional.edge_softmax``, GATv2's attention logits
and the attention aggregation, with their own autograd; their dense, masked twins for padded attention blocks."""
from ._common import NonFiniteScores, ZooOpError
from .aggregate import edge_weighted_sum
from .dense import dense_entmax, dense_qsoftmax, dense_sparsemax
from .entmax import edge_entmax
from .gatv2 import edge_gatv2_logits
from .qsoftmax import edge_qsoftmax
from .sparsemax import edge_sparsemax

__all__ = ["NonFiniteScores", "ZooOpError", "dense_entmax", "dense_qsoftmax", "dense_sparsemax", "edge_entmax", "edge_gatv2_logits", "edge_qsoftmax",
           "edge_sparsemax", "edge_weighted_sum"]
