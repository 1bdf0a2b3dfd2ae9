/**
 * `@skyward/plugin-joblib` — joblib and scikit-learn for Skyward pools: `Parallel(n_jobs=-1)` and
 * `GridSearchCV(n_jobs=-1)` inside a task spread their work over every worker of the pool.
 */
export { type JoblibOptions, joblib, type SklearnOptions, sklearn } from "./joblib.js";
