with source as (

    select * from {{ ref('raw_customers') }}

),

renamed as (

    select
        customer_id,
        first_name || ' ' || last_name as customer_name,
        {{ shop_utils.clean_text('email') }} as email,
        signup_date,
        upper(country_code) as country_code,
        is_test_account,
        coalesce(marketing_opt_in, false) as is_marketing_opt_in
    from source

)

select * from renamed
