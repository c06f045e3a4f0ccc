"""The storage backends of the data path, behind the one dispatch of :mod:`dperm.design`.

* :mod:`dperm.backends.rows` — the row-norm and clipping rule (norms, clip scales,
  the count of clipped rows, the augmented bound, per-example clip factors), the
  same for every backend;
* :mod:`dperm.backends.numpy` — :class:`~dperm.backends.numpy.Design`, the view of
  a dense array, memmap or CSR matrix; :mod:`dperm.backends.numpy_inputs` — its
  input rules (building, validation, labels, weights);
* :mod:`dperm.backends.dask` — :class:`~dperm.backends.dask.DaskDesign`, the same
  view served by the partitions of a Dask array on a cluster;
  :mod:`dperm.backends.dask_inputs` — its input rules, run on the workers.

Import the Design and friends from :mod:`dperm.design`; nothing here imports Dask
until the dispatch hands a Dask collection to :mod:`dperm.backends.dask_inputs`.
"""
