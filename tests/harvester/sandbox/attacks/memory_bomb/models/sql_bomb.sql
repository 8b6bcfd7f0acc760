-- attack: one aggregate that must hold ~20 GB in memory (cannot spill)
select string_agg(repeat('x', 10000), '') as blob from range(2000000)
