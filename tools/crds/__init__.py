"""The generator of gpufleet's CustomResourceDefinitions and the chart files that hold
them (:mod:`tools.crds.chart`), from the loader's field tables (:mod:`tools.crds.schema`)."""
