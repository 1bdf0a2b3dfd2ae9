/**
 * How long a machine whose container image is pulled on the host before it starts (RunPod, Vast.ai) may
 * take to be running with its SSH port when the pool's options leave `provisionTimeout` unset: a large
 * CUDA image on a host that has not cached it takes 20–30 minutes (issue 19). A provider's
 * `capabilities.provisionTimeout`.
 */
export const IMAGE_PULL_PROVISION_TIMEOUT_SECONDS = 1800;
