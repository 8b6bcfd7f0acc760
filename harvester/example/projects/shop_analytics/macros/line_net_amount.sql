{#- What a customer pays for one order line: quantity times unit price, less any line discount.
    A missing discount means no discount. -#}
{% macro line_net_amount(quantity, unit_price, discount) -%}
    ({{ quantity }} * {{ unit_price }} - coalesce({{ discount }}, 0))
{%- endmacro %}
