"""A scikit-learn grid search over several estimator families, its fits spread over the pool.

Inside a pool with the ``sklearn`` plugin, joblib's default backend is Skyward's: ``n_jobs=-1``
means every task slot of the pool (nodes x concurrency), and each batch of cross-validation fits
runs as a nested task on whichever worker is free. The scikit-learn code is unchanged.
"""

from __future__ import annotations

from typing import Any, Dict

import joblib

import skyward as sky


def node_scorer(estimator: Any, X: Any, y: Any) -> float:
    """A "score" that records which node ran this fit, so the search shows where its work went."""
    return float(sky.instance_info().node)


def _search(n_jobs: int) -> Any:
    from sklearn.datasets import load_digits
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    X, y = load_digits(return_X_y=True)
    pipeline = Pipeline([("scale", StandardScaler()), ("model", SVC())])
    # One grid per estimator family; the search picks the best model across all of them.
    grid = [
        {"model": [SVC()], "model__C": [0.1, 1, 10], "model__kernel": ["linear", "rbf"]},
        {"model": [LogisticRegression(max_iter=500)], "model__C": [0.01, 0.1, 1]},
        {
            "model": [RandomForestClassifier(n_estimators=30, random_state=0)],
            "model__max_depth": [5, None],
        },
    ]
    scoring = {"accuracy": "accuracy", "node": node_scorer}
    return GridSearchCV(pipeline, grid, cv=3, scoring=scoring, refit="accuracy", n_jobs=n_jobs).fit(X, y)


def grid_search() -> Dict[str, Any]:
    """``GridSearchCV(n_jobs=-1)`` on the pool, and the same search run sequentially here to compare."""
    search = _search(n_jobs=-1)
    with joblib.parallel_backend("sequential"):
        local = _search(n_jobs=1)

    results = search.cv_results_
    splits = search.n_splits_
    nodes = sorted(
        {int(node) for index in range(splits) for node in results[f"split{index}_test_node"]}
    )
    per_family: Dict[str, float] = {}
    for params, score in zip(results["params"], results["mean_test_accuracy"]):
        family = type(params["model"]).__name__
        per_family[family] = max(per_family.get(family, 0.0), float(score))
    best = {
        key: (type(value).__name__ if key == "model" else value)
        for key, value in search.best_params_.items()
    }
    return {
        "candidates": len(results["params"]),
        "fits": len(results["params"]) * splits,
        "n_jobs": joblib.effective_n_jobs(-1),
        "nodes": nodes,
        "best_params": best,
        "best_score": float(search.best_score_),
        "best_per_family": per_family,
        "local_best_score": float(local.best_score_),
        "local_best_model": type(local.best_params_["model"]).__name__,
    }
