"""A small GGUF header reader for tests/serve_models.sh,
written from the GGUF specification (ggml's docs/gguf.md), independent of
qkv's own reader: the metadata, every tensor's shape and type, and what
Ollama's listing derives from them.
"""
import struct

# GGUF metadata value types: struct formats of the scalars (8 string, 9 array).
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
# llama.cpp's llama_ftype (general.file_type) names, as llama-quantize spells them.
FILE_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
              11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
              17: "Q5_K_M", 18: "Q6_K", 25: "IQ4_NL", 30: "IQ4_XS", 32: "BF16"}
# ggml tensor type names of the unquantized types.
TENSOR_TYPES = {0: "F32", 1: "F16", 30: "BF16"}


class Header:
    def __init__(self):
        self.metadata = {}
        self.tensors = []  # (name, dims, ggml type)
        self.parameters = 0


def read(path):
    h = Header()
    with open(path, "rb") as f:
        def num(fmt):
            return struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))[0]

        def text():
            return f.read(num("Q")).decode("utf-8", "replace")

        def value(kind):
            if kind == 8:
                return text()
            if kind == 9:
                elem, n = num("I"), num("Q")
                return [value(elem) for _ in range(n)]
            return num(_SCALARS[kind])

        if f.read(4) != b"GGUF":
            raise ValueError(path + " is not a GGUF file")
        num("I")  # version
        n_tensors, n_kv = num("Q"), num("Q")
        for _ in range(n_kv):
            key = text()
            h.metadata[key] = value(num("I"))
        for _ in range(n_tensors):
            name = text()
            dims = [num("Q") for _ in range(num("I"))]
            kind = num("I")
            num("Q")  # offset
            h.tensors.append((name, dims, kind))
            count = 1
            for d in dims:
                count *= d
            h.parameters += count
    return h


def quantization(h):
    """general.file_type's name; without it, the one type of the matrices (None when mixed)."""
    if "general.file_type" in h.metadata:
        return FILE_TYPES[h.metadata["general.file_type"]]
    kinds = {kind for _, dims, kind in h.tensors if len(dims) >= 2}
    return TENSOR_TYPES[kinds.pop()] if len(kinds) == 1 else None


def ollama_parameter_size(n):
    """Ollama's format of a parameter count: 8.0B, 494.03M, 260K."""
    if n >= 1000000000:
        return "%.1fB" % (n / 1e9)
    if n >= 1000000:
        return "%.2fM" % (n / 1e6)
    if n >= 1000:
        return "%.0fK" % (n / 1e3)
    return str(n)
