/**
 * `@skyward/plugin-jax` — JAX for Skyward pools: the wheels for your CUDA version, and
 * `jax.distributed` initialised across the pool's nodes.
 */
export { type JaxCuda, type JaxOptions, jax } from "./jax.js";
