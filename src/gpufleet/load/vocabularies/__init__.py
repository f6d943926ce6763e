"""Other schedulers' vocabularies (KAI, Volcano, Kueue, ElasticQuota) read into gpufleet's model."""
