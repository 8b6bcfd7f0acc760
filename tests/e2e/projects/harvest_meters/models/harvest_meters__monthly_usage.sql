-- One row per meter and calendar month with at least one real (not estimated) reading.
with readings as (

    select * from {{ ref('stg_harvest_meters__readings') }}
    where is_estimated is not true

)

select
    meter_id,
    {{ shop_calendar.first_day_of_month('read_at') }} as usage_month,
    count(*) as real_readings,
    sum(coalesce(volume_m3, 0)) as used_m3
from readings
group by 1, 2
