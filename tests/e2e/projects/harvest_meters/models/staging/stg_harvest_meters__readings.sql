select
    cast(reading_id as integer) as reading_id,
    cast(meter_id as integer) as meter_id,
    cast(read_at as timestamp) as read_at,
    cast(volume_m3 as decimal(9, 2)) as volume_m3,
    cast(is_estimated as boolean) as is_estimated
from {{ source('harvest_meters', 'meters_readings') }}
