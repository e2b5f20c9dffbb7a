"""Layers: LTGAConv (learnable Tsallis attention) and the SigGate-GT graph-transformer blocks."""
from zoo.nn.encoders import AtomEncoder, BondEncoder, LinearFeatureEncoder, NodeFeatureEncoder, TypeDictEncoder
from zoo.nn.gated_attention import GatedMultiheadAttention, to_dense_batch
from zoo.nn.gps_layer import GPSLayer
from zoo.nn.ltga_conv import EdgeGate, LTGAConv
from zoo.nn.positional_encoders import LapPEDeepSet, RWSEEncoder, SignNetLapPE

__all__ = ["AtomEncoder", "BondEncoder", "EdgeGate", "GPSLayer", "GatedMultiheadAttention", "LTGAConv",
           "LapPEDeepSet", "LinearFeatureEncoder", "NodeFeatureEncoder", "RWSEEncoder", "SignNetLapPE",
           "TypeDictEncoder", "to_dense_batch"]
