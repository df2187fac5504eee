/* What Caffe files written for other Caffes hold beyond Cortado's schema and
 * layer table, so that a message can say where a field or a layer type comes
 * from instead of guessing a typo: BVLC Caffe's layer types, the fields and
 * layer types of well-known forks (SSD, NVIDIA's Caffe, Fast R-CNN,
 * DeepLab), and the multi-GPU settings that guides on the web put in
 * solvers. */
#ifndef CT_PROTO_CATALOG_H
#define CT_PROTO_CATALOG_H

#include <stdbool.h>
#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Whether BVLC Caffe (master) registers a layer type of this name. */
bool ct_caffe_is_layer_type(const char *type);

/* The layer types BVLC Caffe registers, in alphabetical order; *n gets the
 * count. */
const char *const *ct_caffe_layer_types(size_t *n);

/* The Caffe fork a layer type comes from, e.g. "SSD's Caffe fork
 * (weiliu89/caffe)", or NULL. */
const char *ct_caffe_fork_of_layer_type(const char *type);

/* What to tell about field `field` of message type `message` (its short
 * name, "LayerParameter") when Cortado's schema lacks it: where it comes
 * from ("a field of NVIDIA's Caffe fork (NVCaffe), which Cortado does not
 * implement") or what to do instead; NULL for a field no Caffe we know
 * has (a typo, most likely). */
const char *ct_caffe_foreign_field_note(const char *message, const char *field);

/* What to tell when a field that takes one value was given a list
 * (`device_id: 0,1`), or NULL. */
const char *ct_caffe_list_note(const char *message, const char *field);

/* Logs a warning for each field of NVIDIA's Caffe (NVCaffe) that msg (a
 * NetParameter with its layers, or a SolverParameter) sets and that Cortado
 * parses but does not act on, saying what Cortado does instead; returns how
 * many.  The fields Cortado honours (forward_type, default_forward_type,
 * min_lr, ...) are not named. */
int ct_caffe_log_ignored_fields(const ProtobufCMessage *msg);

#ifdef __cplusplus
}
#endif

#endif
