/*
 * quantize.h — re-encoding a GGUF model's weights in another type.
 *
 * Every 2-D weight whose row length fits the target type's block is
 * converted (through F32, with the reference quantisers of type.h); 1-D
 * tensors (norms, biases) stay F32; tensors that cannot be converted keep
 * their type and are listed in the report. All metadata is copied and
 * general.file_type updated.
 */
#ifndef HET_QUANTIZE_H
#define HET_QUANTIZE_H

#include <stdint.h>

#include "het/status.h"
#include "het/type.h"

#ifdef __cplusplus
extern "C" {
#endif

struct het_quantize_report {
    int64_t n_converted;   /* tensors re-encoded                        */
    int64_t n_kept;        /* tensors left in their type                */
    char    notes[1024];   /* "blk.0.ffn_down.weight: kept f32 (ne0 172)" */
};

enum het_status het_quantize_model(const char *in_path, const char *out_path, enum het_type type,
                                   struct het_quantize_report *report, het_error *err);

#ifdef __cplusplus
}
#endif
#endif /* HET_QUANTIZE_H */
