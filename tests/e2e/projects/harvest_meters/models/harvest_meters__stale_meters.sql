-- Meters whose last real reading is more than 45 days old (or that were never really read).
with last_real as (

    select
        meter_id,
        max(read_at) as last_read_at
    from {{ ref('stg_harvest_meters__readings') }}
    where is_estimated is not true
    group by 1

)

select
    devices.meter_id,
    devices.account_id,
    last_real.last_read_at,
    {{ shop_calendar.days_between('last_real.last_read_at', 'current_date') }} as days_since_read
from {{ ref('stg_harvest_meters__devices') }} as devices
left join last_real
    on devices.meter_id = last_real.meter_id
where last_real.last_read_at is null
    or last_real.last_read_at < current_date - interval 45 day
