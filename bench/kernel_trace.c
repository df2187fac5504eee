/* A CUPTI injection library that records every GPU kernel a program runs,
 * CUDA-graph replays included, with its start and end on the device clock,
 * stream, launch shape and registers: the timeline of a training iteration
 * as the GPU ran it (which kernels overlap, where the device waits), which
 * Nsight Compute's one-kernel-at-a-time replays cannot show.
 *
 *   CUDA_INJECTION64_PATH=build/bench/libkernel_trace.so \
 *   KERNEL_TRACE_OUT=trace.csv build/cortado time ...
 *
 * writes one CSV row per kernel (start,end,stream,graph,grid,block,regs,
 * smem,name) when the program exits; bench/kernel_timeline.sh runs it and
 * prints one iteration. */
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>

static FILE *g_out;

static void CUPTIAPI on_buffer_request(uint8_t **buffer, size_t *size, size_t *max_records) {
  *size = (size_t)8 << 20;
  *buffer = aligned_alloc(8, *size);
  *max_records = 0;
}

static void CUPTIAPI on_buffer_complete(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                                        size_t size, size_t valid) {
  (void)ctx, (void)stream, (void)size;
  CUpti_Activity *record = NULL;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)record;
    fprintf(g_out, "%llu,%llu,%u,%u,%d,%d,%d,%d,\"%.160s\"\n", (unsigned long long)k->start,
            (unsigned long long)k->end, k->streamId, k->graphId, k->gridX * k->gridY * k->gridZ,
            k->blockX * k->blockY * k->blockZ, k->registersPerThread,
            k->dynamicSharedMemory + k->staticSharedMemory, k->name ? k->name : "?");
  }
  free(buffer);
}

static void flush_at_exit(void) {
  cuptiActivityFlushAll(1);
  if (g_out) fclose(g_out);
}

/* Called by the CUDA driver when CUDA_INJECTION64_PATH names this library. */
int InitializeInjection(void) {
  const char *path = getenv("KERNEL_TRACE_OUT");
  g_out = fopen(path ? path : "kernel_trace.csv", "w");
  if (!g_out) return 0;
  fprintf(g_out, "start,end,stream,graph,grid,block,regs,smem,name\n");
  if (cuptiActivityRegisterCallbacks(on_buffer_request, on_buffer_complete) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
    fclose(g_out);
    g_out = NULL;
    return 0;
  }
  atexit(flush_at_exit);
  return 1;
}
