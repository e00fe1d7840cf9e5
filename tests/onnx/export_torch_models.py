#!/usr/bin/python3
"""Exports a small CNN and a small transformer from PyTorch (Debian's python3-torch) to ONNX, with
inputs and PyTorch's outputs in ONNX's test layout (model.onnx, test_data_set_0/input_*.pb and
output_*.pb), so that onnx_conformance runs them like the backend tests:

    /usr/bin/python3 tests/onnx/export_torch_models.py tests/onnx/torch_models
    build/tests/onnx_conformance --dirs $PWD/tests/onnx/torch_models

Not part of CI (it needs torch); the files it writes are small and committed. The .pb files are
TensorProtos written by hand (dims, data_type, raw_data), so the onnx Python package is not needed.
"""
import os
import sys

import torch

FLOAT, INT64 = 1, 7


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def tensor_proto(t, name):
    t = t.detach().contiguous()
    dtype = {torch.float32: FLOAT, torch.int64: INT64}[t.dtype]
    msg = b"".join(b"\x08" + varint(d) for d in t.shape)             # 1: dims
    msg += b"\x10" + varint(dtype)                                    # 2: data_type
    msg += b"\x42" + varint(len(name)) + name.encode()                # 8: name
    raw = t.numpy().tobytes()
    msg += b"\x4a" + varint(len(raw)) + raw                           # 9: raw_data
    return msg


class SmallCnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.pool = torch.nn.AdaptiveAvgPool2d(1)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.nn.functional.max_pool2d(x, 2)
        x = torch.nn.functional.gelu(self.conv2(x))
        return torch.log_softmax(self.fc(self.pool(x).flatten(1)), dim=1)


class SmallTransformer(torch.nn.Module):
    def __init__(self, vocab=50, d=32, heads=4, length=12):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Parameter(torch.randn(length, d) * 0.1)
        layer = torch.nn.TransformerEncoderLayer(d, heads, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=2)
        self.norm = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        return self.head(self.norm(self.encoder(x)))


def export(model, inputs, directory):
    os.makedirs(os.path.join(directory, "test_data_set_0"), exist_ok=True)
    model.eval()
    with torch.no_grad():
        outputs = model(*inputs)
    names = [f"input_{i}" for i in range(len(inputs))]
    torch.onnx.export(model, tuple(inputs), os.path.join(directory, "model.onnx"), input_names=names,
                      output_names=["output_0"], opset_version=14)
    for i, t in enumerate(inputs):
        with open(os.path.join(directory, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
            f.write(tensor_proto(t, names[i]))
    with open(os.path.join(directory, "test_data_set_0", "output_0.pb"), "wb") as f:
        f.write(tensor_proto(outputs, "output_0"))


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "torch_models"
    torch.manual_seed(0)
    cnn = SmallCnn()
    with torch.no_grad():  # BatchNorm statistics that are not the identity
        cnn.bn1.running_mean.uniform_(-0.5, 0.5)
        cnn.bn1.running_var.uniform_(0.5, 2.0)
    export(cnn, [torch.randn(2, 1, 16, 16)], os.path.join(root, "test_small_cnn"))
    export(SmallTransformer(), [torch.randint(0, 50, (2, 12))], os.path.join(root, "test_small_transformer"))


if __name__ == "__main__":
    main()
