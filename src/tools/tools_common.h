/* Helpers shared by the data tools (the .c files of src/tools); not a public API. */
#ifndef CT_TOOLS_TOOLS_COMMON_H
#define CT_TOOLS_TOOLS_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "data/db.h"

/* How often the converters log "Processed N files." (Caffe's
 * convert_imageset logs every 1000; the bulk converters every 10000). */
#define CT_TOOLS_PROGRESS_EVERY 1000
#define CT_TOOLS_PROGRESS_EVERY_BULK 10000

/* Removes the folder at path and everything under it (not following links).
 * Used only on a database a tool created itself and then failed to finish,
 * so that no half-written database is left looking complete.  Failures are
 * logged as warnings. */
void ct_tools_remove_tree(const char *path);

/* The back end of an existing database folder: LMDB when it holds data.mdb,
 * LevelDB when it holds CURRENT; `fallback` when neither (or path is
 * missing), so that opening then fails with the back end's own message. */
ct_db_backend ct_tools_detect_backend(const char *path, ct_db_backend fallback);

/* Puts one record (key of klen bytes, serialized Datum) into db and frees
 * *value (set to NULL).  Errors: those of ct_db_put. */
ct_status ct_tools_put_owned(ct_db *db, const char *key, size_t klen, uint8_t **value,
                             size_t vlen, ct_error *err);

#endif
