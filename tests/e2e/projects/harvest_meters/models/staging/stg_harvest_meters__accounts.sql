select
    cast(account_id as integer) as account_id,
    account_name,
    cast(rate_per_m3 as decimal(8, 3)) as rate_per_m3,
    cast(free_m3 as decimal(8, 1)) as free_m3
from {{ source('harvest_meters', 'meters_accounts') }}
