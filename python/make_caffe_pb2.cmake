# Writes cortado/proto/caffe_pb2.py: caffe.proto's FileDescriptorSet
# (DESC, as protoc writes it with --descriptor_set_out) embedded in a module
# that registers it with google.protobuf and builds the message classes, as
# the code protoc generates for Python does.  Needs only google.protobuf
# (3.20 or later) at run time.
#   cmake -DDESC=caffe.desc -DOUT=caffe_pb2.py -P make_caffe_pb2.cmake
file(READ ${DESC} hex HEX)
string(LENGTH "${hex}" n)
# 160 hex digits (80 bytes) a line
set(lines "")
set(pos 0)
while(pos LESS n)
  string(SUBSTRING "${hex}" ${pos} 160 chunk)
  string(APPEND lines "    '${chunk}'\n")
  math(EXPR pos "${pos} + 160")
endwhile()
file(WRITE ${OUT} "\"\"\"Caffe's schema (src/proto/caffe.proto) as google.protobuf message classes.

Made at build time from the schema's descriptor; do not edit.
\"\"\"
from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf import descriptor_pool as _descriptor_pool
from google.protobuf.internal import builder as _builder

_SET = _descriptor_pb2.FileDescriptorSet.FromString(bytes.fromhex(
${lines}))
DESCRIPTOR = _descriptor_pool.Default().AddSerializedFile(_SET.file[0].SerializeToString())
_builder.BuildMessageAndEnumDescriptors(DESCRIPTOR, globals())
_builder.BuildTopDescriptorsAndMessages(DESCRIPTOR, __name__, globals())
del _SET
")
