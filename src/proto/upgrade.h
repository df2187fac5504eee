/* In-memory upgrade of old Caffe nets and solvers to the current format,
 * following BVLC Caffe's rules, so the rest of Cortado only ever sees:
 *   - nets made of `layer { type: "..." }` (LayerParameter) entries, with
 *     net inputs expressed as an Input layer;
 *   - solvers whose update rule is the `type` string.
 *
 * Both functions edit a message tree that owns its memory like one from
 * protobuf_c_message_unpack(desc, NULL, ...) (or the text parser): released
 * parts are freed, new parts are malloc'd, so the tree is still freed with
 * protobuf_c_message_free_unpacked(msg, NULL). */
#ifndef CT_PROTO_UPGRADE_H
#define CT_PROTO_UPGRADE_H

#include <stdbool.h>

#include "caffe.pb-c.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Upgrades `net` in place, in Caffe's order:
 *   1. V0 nets (`layers { layer { type: "conv" ... } }`): "padding" layers are
 *      folded into the conv/pool layer they feed, then each V0 layer becomes a
 *      V1 layer (fields moved into convolution_param, pooling_param, ...,
 *      transform_param);
 *   2. V1 data layers (Data, ImageData, WindowData) move their scale,
 *      mean_file, crop_size and mirror into transform_param;
 *   3. V1 layers (`layers { type: CONVOLUTION }`) become LayerParameters:
 *      name, bottoms, tops, include/exclude, blobs, loss_weight, every *_param
 *      moved over; param names, blob_share_mode, blobs_lr and weight_decay
 *      become ParamSpecs (name, share_mode, lr_mult, decay_mult);
 *   4. net-level `input` with `input_shape` or `input_dim` becomes an Input
 *      layer named "input" placed first (inputs without shapes are dropped, as
 *      in old caffemodels);
 *   5. BatchNorm layers that declare exactly three `param` entries get
 *      lr_mult = 0 and decay_mult = 0 on each (the statistics are not
 *      learned).
 * *changed (may be NULL) tells whether anything was modified; an already
 * current net is left untouched, byte for byte.  Steps that apply are logged
 * at INFO naming source_name (a file name, used in messages only; may be
 * NULL).  V0 settings that do not apply to their layer's type are dropped
 * with a WARNING, as Caffe drops them.
 *
 * Errors (CT_ERR_INVALID; the net is left unmodified; messages start with
 * "SOURCE: "):
 *   - both `layer` and `layers` entries ("... has both 'layer' and 'layers'
 *     entries ...");
 *   - a mix of V0 and V1 entries in `layers`;
 *   - an unknown V0 type string or V1 type value;
 *   - a V0 bottom that is neither a net input nor an earlier top;
 *   - a padding layer that does not feed a single-input conv or pool layer,
 *     or that does not have exactly one bottom and one top;
 *   - `input` entries whose `input_shape` count (or `input_dim` count / 4)
 *     does not match. */
ct_status ct_net_upgrade(Caffe__NetParameter *net, bool *changed, const char *source_name,
                         ct_error *err);

/* Replaces the deprecated `solver_type` enum by the `type` string (SGD,
 * Nesterov, AdaGrad, RMSProp, AdaDelta, Adam) and clears solver_type, and
 * upgrades the inline nets (net_param, train_net_param, each
 * test_net_param) as ct_net_upgrade does, naming them "SOURCE: net_param",
 * "SOURCE: test_net_param[1]" in its messages.  *changed (may be NULL)
 * tells whether anything was modified.
 * Errors (CT_ERR_INVALID): both set and naming different rules ("SOURCE:
 * solver_type: ADAM disagrees with type: \"SGD\"; remove solver_type"), an
 * unknown solver_type value, or an inline net's error.  A failed upgrade may
 * leave the inline nets before the failing one upgraded. */
ct_status ct_solver_upgrade(Caffe__SolverParameter *solver, bool *changed, const char *source_name,
                            ct_error *err);

#ifdef __cplusplus
}
#endif

#endif
