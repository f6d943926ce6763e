"""The cycle: the backlog dispatched queue by queue, each job admitted, placed or given room;
the sessions opened on the cache; the commit step and the journal of reasons."""
