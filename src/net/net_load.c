#include "net/net_load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "proto/reflect.h"
#include "proto/textformat.h"
#include "proto/upgrade.h"

/* Reads the text message of type desc at path with source positions.  When
 * it fails on unknown fields and the file reads as the other type (a solver
 * given as a net, or a net as a solver), says so; otherwise, with several
 * unknown fields, each one is logged. */
static ct_status read_text(const char *path, const ProtobufCMessageDescriptor *desc,
                           const ProtobufCMessageDescriptor *other, ProtobufCMessage **out, ct_error *err) {
  ct_status st = ct_text_parse_file_with(desc, path, CT_TEXT_POSITIONS, out, err);
  if (st != CT_ERR_PARSE || !strstr(err->msg, ": unknown field '")) return st;
  ProtobufCMessage *probe;
  if (ct_text_parse_file_with(other, path, 0, &probe, NULL) == CT_OK) {
    if (other == &caffe__solver_parameter__descriptor) {
      const Caffe__SolverParameter *sp = (const Caffe__SolverParameter *)probe;
      const char *net = sp->net ? sp->net : sp->train_net;
      char names[1024] = "";
      if (net) snprintf(names, sizeof names, " (this one names net: \"%.900s\")", net);
      st = ct_error_set(err, CT_ERR_PARSE,
                        "%s looks like a solver (a SolverParameter), not a net: train with "
                        "'cortado train --solver=%s'; --model takes a net%s",
                        path, path, names);
    } else {
      st = ct_error_set(err, CT_ERR_PARSE,
                        "%s looks like a net (a NetParameter), not a solver: give it to 'cortado time' or "
                        "'cortado test' as --model=%s, or name it in a solver (net: \"%s\") for "
                        "'cortado train --solver'",
                        path, path, path);
    }
    protobuf_c_message_free_unpacked(probe, NULL);
    return st;
  }
  if (strstr(err->msg, " more unknown field"))
    st = ct_text_parse_file_with(desc, path, CT_TEXT_POSITIONS | CT_TEXT_LOG_UNKNOWN, out, err);
  return st;
}

ct_status ct_net_param_read(const char *path, Caffe__NetParameter **out, ct_error *err) {
  *out = NULL;
  ProtobufCMessage *m;
  CT_TRY(read_text(path, &caffe__net_parameter__descriptor, &caffe__solver_parameter__descriptor, &m, err));
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
  CT_TRY(read_text(path, &caffe__solver_parameter__descriptor, &caffe__net_parameter__descriptor, &m, err));
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
