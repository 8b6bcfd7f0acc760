{#- 'YYYY-MM' label of the month containing a date (uses shop_calendar). -#}
{% macro month_label(date_expr) -%}
    strftime({{ shop_calendar.month_start(date_expr) }}, '%Y-%m')
{%- endmacro %}
