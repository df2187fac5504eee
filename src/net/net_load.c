#include "net/net_load.h"

#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "proto/reflect.h"
#include "proto/textformat.h"
#include "proto/upgrade.h"

ct_status ct_net_param_read(const char *path, Caffe__NetParameter **out, ct_error *err) {
  *out = NULL;
  ProtobufCMessage *m;
  CT_TRY(ct_text_parse_file(&caffe__net_parameter__descriptor, path, &m, err));
  Caffe__NetParameter *net = (Caffe__NetParameter *)m;
  bool changed = false;
  ct_status s = ct_net_upgrade(net, &changed, path, err);
  if (s != CT_OK) {
    protobuf_c_message_free_unpacked(m, NULL);
    return s;
  }
  if (changed) LOG_INFO("Upgraded %s from an old net format in memory", path);
  *out = net;
  return CT_OK;
}

ct_status ct_solver_param_read(const char *path, Caffe__SolverParameter **out, ct_error *err) {
  *out = NULL;
  ProtobufCMessage *m;
  CT_TRY(ct_text_parse_file(&caffe__solver_parameter__descriptor, path, &m, err));
  Caffe__SolverParameter *sp = (Caffe__SolverParameter *)m;
  bool changed = false;
  ct_status s = ct_solver_upgrade(sp, &changed, path, err);
  if (s != CT_OK) {
    protobuf_c_message_free_unpacked(m, NULL);
    return s;
  }
  if (changed) LOG_INFO("Upgraded %s from an old solver format in memory", path);
  *out = sp;
  return CT_OK;
}
