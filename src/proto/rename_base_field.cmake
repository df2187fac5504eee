# Run after protoc-c on caffe.pb-c.{h,c}: cmake -DPB_DIR=<dir> -P rename_base_field.cmake
#
# protoc-c puts a `ProtobufCMessage base;` header first in every generated
# struct and names each field's member after the field.  Caffe's ExpParameter
# and LogParameter have a field called `base`, so the two members would clash
# and the header would not compile.  This renames the field's member (only the
# member: the descriptor still says "base", so text and binary formats are
# unchanged) to `base_` in those two structs.  Fails loudly when the generated
# code no longer has the expected shape.
foreach(msg ExpParameter LogParameter)
  set(hdr ${PB_DIR}/caffe.pb-c.h)
  set(src ${PB_DIR}/caffe.pb-c.c)
  file(READ ${hdr} h)
  string(REGEX MATCH "struct  Caffe__${msg}\n{\n  ProtobufCMessage base;\n  protobuf_c_boolean has_base;\n  float base;\n" found "${h}")
  if(NOT found)
    message(FATAL_ERROR "rename_base_field: struct Caffe__${msg} not in the expected form in ${hdr}")
  endif()
  string(REPLACE "${found}"
    "struct  Caffe__${msg}\n{\n  ProtobufCMessage base;\n  protobuf_c_boolean has_base;\n  float base_;\n"
    h "${h}")
  file(WRITE ${hdr} "${h}")

  file(READ ${src} c)
  string(FIND "${c}" "offsetof(Caffe__${msg}, base)," at)
  if(at EQUAL -1)
    message(FATAL_ERROR "rename_base_field: offsetof(Caffe__${msg}, base) not found in ${src}")
  endif()
  string(REPLACE "offsetof(Caffe__${msg}, base)," "offsetof(Caffe__${msg}, base_)," c "${c}")
  file(WRITE ${src} "${c}")
endforeach()
