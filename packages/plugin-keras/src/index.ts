/**
 * `@skyward/plugin-keras` — Keras 3 for Skyward pools: the backend chosen before Keras is imported,
 * and data-parallel distribution across the pool with the JAX backend.
 */
export { type KerasBackend, type KerasOptions, keras } from "./keras.js";
