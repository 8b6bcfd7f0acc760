select
    account_id,
    account_name,
    region,
    coalesce(is_key_account, false) as is_key_account,
    onboarded_on
from {{ ref('raw_accounts') }}
