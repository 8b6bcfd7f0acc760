select
    cast(meter_id as integer) as meter_id,
    cast(account_id as integer) as account_id,
    cast(installed_on as date) as installed_on
from {{ source('harvest_meters', 'meters_devices') }}
