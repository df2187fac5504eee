"""Caffe's schema: ``from cortado.proto import caffe_pb2`` (google.protobuf classes)."""
