-- attack: materialize a cross join of 10^10 rows of incompressible values (~300 GB)
select random() as r1, random() as r2, random() as r3, random() as r4
from range(100000) as a cross join range(100000) as b
