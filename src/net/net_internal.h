/* Helpers shared by the net's source files; not part of the public API. */
#ifndef CT_NET_NET_INTERNAL_H
#define CT_NET_NET_INTERNAL_H

#include <stdarg.h>

#include "caffe.pb-c.h"

/* A deep copy (through pack and unpack), freed with protobuf_c_message_free_unpacked. */
Caffe__NetParameter *ct_net_param_clone(const Caffe__NetParameter *p);

#endif
