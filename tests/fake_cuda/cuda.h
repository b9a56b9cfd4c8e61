/* Stand-in for the CUDA driver header, enough for nvtx3/nvToolsExtCuda.h: the opaque handle types.
 * The recorder tests name CUDA resources without a CUDA toolkit. */
#ifndef NVTX_CFFI_TEST_FAKE_CUDA_H
#define NVTX_CFFI_TEST_FAKE_CUDA_H
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
#endif
