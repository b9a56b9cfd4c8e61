/* cuda.h - the four CUDA driver handle types that nvtx3/nvToolsExtCuda.h needs, and nothing else.
 *
 * nvToolsExtCuda.h does #include "cuda.h" for CUdevice, CUcontext, CUstream and CUevent. The shim
 * must build without the CUDA toolkit, so this file (on the shim's include path) declares them
 * exactly as the toolkit does: an int ordinal and three opaque struct pointers. It uses the
 * toolkit's include guard, so if the real cuda.h was already included this file adds nothing. */
#ifndef __cuda_cuda_h__
#define __cuda_cuda_h__

typedef int CUdevice_v1;
typedef CUdevice_v1 CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

#endif
