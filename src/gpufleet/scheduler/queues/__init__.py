"""Who goes next: the backlog of pending jobs, fair-share order, queue admission, a gang's
``minResources`` and the reservations of starving jobs."""
